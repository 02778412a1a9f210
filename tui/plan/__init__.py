"""Layer 4, what exactly each task of a run executes (:mod:`.tasks`), each task's share of its
host (:mod:`.allocation`), the placement preview and the checks made before anything starts."""
