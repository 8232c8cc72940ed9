"""The TensorRT runner and the TensorRT build check, one module per job (no import circle; imports point down).

* :mod:`.library`: which TensorRT this process uses (full TensorRT first, else TensorRT-RTX) and how it is named;
* :mod:`.datatypes`: TensorRT data types <-> precisions and host buffers, version-dependent flags (pure);
* :mod:`.plan`: parse ONNX and build a strongly typed plan (standard library only; also the build child script);
* :mod:`.typed_build`: the sweep's build check: build in a child (:mod:`harness.core.child`), compare the types;
* :mod:`.inspector`: the engine inspector's JSON -> per-layer precision report;
* :mod:`.precision_diff`: realized precisions vs the ONNX model's declared types;
* :mod:`.device`: GPU memory (cuda-python or pycuda);
* :mod:`.engine`: open a real engine (build, validity, context) -> :class:`~.engine.LiveEngine`;
* :mod:`.runner`: :class:`~.runner.TrtRunner`, the run path over a live engine.

Nothing here imports ``tensorrt`` at module level.
"""
