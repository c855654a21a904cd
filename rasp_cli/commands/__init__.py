"""Subcommands of the `rasp` CLI, one module each (each defines `register(subparsers)`)."""
