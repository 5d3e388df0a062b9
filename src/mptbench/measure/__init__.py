"""What the hardware and build can do: start-up facts, fingerprint, FLOPs and measured peaks."""
