"""The local launcher: tasks on this machine, cold (a new interpreter) or warm (forked from a pool
that imported TensorFlow once)."""
