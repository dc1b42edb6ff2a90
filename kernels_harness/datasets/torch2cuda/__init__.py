"""torch2cuda task families (PyTorch modules in the KernelBench layout)."""
