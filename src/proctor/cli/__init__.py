"""Command line: parsing and calling the API, nothing more."""
