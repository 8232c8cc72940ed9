"""Data stage: model files (onnxfile), feeds, recipes, goldens."""
