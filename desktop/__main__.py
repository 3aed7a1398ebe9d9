"""`python -m desktop` is `rigscope`."""

from desktop.cli import main

raise SystemExit(main())
