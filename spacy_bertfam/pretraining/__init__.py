"""Pretraining objectives, data and the training loop (pure torch + tokenizers)."""
