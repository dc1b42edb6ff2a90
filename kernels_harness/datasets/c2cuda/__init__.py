"""c2cuda task families (serial C programs to translate)."""
