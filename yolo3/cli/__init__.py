"""Command-line entry points. Each module parses arguments and calls the library; tools/*.py and the
console scripts are thin wrappers over ``main()``."""
