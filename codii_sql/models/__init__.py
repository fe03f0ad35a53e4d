"""Text to vectors: the Embedder interface and registry, the bundled ONNX model, the embedding cache, the cross-encoder."""
