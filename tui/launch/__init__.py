"""Launchers: how task processes are started, streamed and signalled on a host."""
