"""Rigscope: monitor, stress-test and get advice for an AI developer's GPU workstation."""

__version__ = "0.1.0"
