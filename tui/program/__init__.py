"""Layer 3, what a task runs: the task-program interface (:mod:`.base`), the built-in
trainer and the user's own program behind it, metrics read from log text, the rules that end a
run (:mod:`.end_rules`) and what a kind of host means for a plan (:mod:`.hostkind`)."""
