"""Admin pages and the `clinconsensus` command line."""
