"""Layer 0: small, dependency-free pieces every layer may use (exit codes, the one sanitiser
for text that reaches a terminal, unit formatting)."""
