"""Layer 5, what both front ends run: the session (:mod:`.session`), the supervisor and its
parts (:mod:`.supervisor`), the events it publishes (:mod:`.events`), task and run states
(:mod:`.task_state`), progress, hints, the run directory, traffic per ps, typed commands,
options and exit codes. Knows nothing of Textual."""
