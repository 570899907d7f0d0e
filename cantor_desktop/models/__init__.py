"""Model files: the catalogue, the Hugging Face hub, the library on disk, pulls, imports,
LoRA adapters and GGUF reading."""
