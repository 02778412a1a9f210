"""Layer 2, launchers: how task processes are started, streamed and signalled on a host, the
hosts' probes, and the search for leftover tasks of earlier runs."""
