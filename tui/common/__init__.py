"""Small pure helpers every layer may use."""
