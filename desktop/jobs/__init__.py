"""`rigscope run`: the user's own job wrapped, its progress read, a thermal guard, its card."""
