"""The command line: one thin module per subcommand group; each parses and delegates."""
