"""Layer 1, hosts.yaml and what it says: the budgeted YAML reader (:mod:`.yamlload`), the
loader (:mod:`.load`) and the frozen model it builds (:mod:`.cluster`, :mod:`.resources`,
:mod:`.program`, :mod:`.program_spec`, :mod:`.restart_policy`). Imports nothing else of tui."""
