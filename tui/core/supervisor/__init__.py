"""The supervisor's parts, one job each: the records of a run and its tasks
(:mod:`.records`), launching and watching one task's process (:mod:`.process`), the staged
start (:mod:`.staged`), stopping (:mod:`.stopping`), acting on failures (:mod:`.recovery`,
which asks :mod:`tui.config.restart_policy` what to do) and the summary (:mod:`.summary`).
:class:`tui.core.supervisor.lifecycle.Supervisor` puts them together."""
