"""One thin module per pipeline stage over the Rust core: topology → routing → traffic (and
mapping) → analysis | flowsim | flitsim. Each is also importable as ``netweave.<stage>``."""
