"""Pure PyTorch models: no spaCy or thinc imports below this package."""
