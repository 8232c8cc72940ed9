"""Train the bundled MNIST-style CNN in pure numpy and export it with the ONNX-zoo names.

Data: scikit-learn's bundled 8x8 digits (values 0..16), bilinearly upsampled
to 20x20 and zero-padded to 28x28 (the MNIST layout: a 20x20 digit centred in
28x28), quantized to 8 bits exactly as a .pgm stores them. The network follows
the ONNX-zoo MNIST model:

    Input3 [1,1,28,28] -> Convolution28 (8x5x5, same) -> Plus30 -> ReLU32 -> Pooling66 (2x2)
      -> Convolution110 (16x5x5, same) -> Plus112 -> ReLU114 -> Pooling160 (3x3, stride 3)
      -> Times212_reshape0 [1,256] -> Times212 (MatMul) -> Plus214 -> Plus214_Output_0 [1,10]

Training is plain minibatch Adam with hand-written backprop (im2col
convolutions), a fixed seed and single-threaded BLAS, so a rebuild gives the
same bytes (see ``test_models.build`` for the pinned arithmetic). No torch is
needed. After training, an exact power-of-two rescaling sets each conv block's
activation range (:data:`ACTIVATION_TARGETS`) without changing the logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

from .artifacts import make_model

DIGIT_SIZE = 20  # an MNIST digit fills a 20x20 box centred in the 28x28 image
IMAGE_SIZE = 28
KERNEL = 5
CHANNELS = (8, 16)
FEATURES = CHANNELS[1] * 4 * 4
# Activation range per conv block (max |Conv| or |Conv + bias| over the training images): block 1 below the
# TensorRT sample's data_max=4 (so its AutoCast call puts it in fp16), block 2 above it (kept fp32).
ACTIVATION_TARGETS = (2.5, 12.0)


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    epochs: int = 12
    batch_size: int = 32
    learning_rate: float = 2e-3
    test_fraction: float = 0.2


@dataclass(frozen=True)
class Dataset:
    """Images as stored in a .pgm (uint8, inverted: 255 - intensity) and their labels."""

    pgm_train: np.ndarray
    y_train: np.ndarray
    pgm_test: np.ndarray
    y_test: np.ndarray


@dataclass(frozen=True)
class TrainedModel:
    model: onnx.ModelProto
    test_accuracy: float  # measured with onnxruntime on the exported model
    sample_indices: tuple[int, ...]  # index into the test split of the shipped digit 0..9
    activation_absmax: dict[str, float]  # per exported tensor, over the test split


def model_input(pgm: np.ndarray) -> np.ndarray:
    """The TensorRT sample's preprocessing: ``1 - pgm/255`` as float32, shape (N,1,28,28)."""
    arr = 1.0 - np.asarray(pgm, dtype=np.float64) / 255.0
    return arr.reshape(-1, 1, IMAGE_SIZE, IMAGE_SIZE).astype(np.float32)


def _resample_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Bilinear resampling (half-pixel centres, edge clamped) as an (n_out, n_in) matrix."""
    src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    grid = np.arange(n_in)
    return np.stack([np.interp(src, grid, np.eye(n_in)[j]) for j in range(n_in)], axis=1)


def load_dataset(config: TrainConfig) -> Dataset:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    r = _resample_matrix(8, DIGIT_SIZE)
    up = np.einsum("ij,njk,lk->nil", r, digits.images / 16.0, r)  # R @ img @ R.T per image
    pad = (IMAGE_SIZE - DIGIT_SIZE) // 2
    intensity = np.pad(np.clip(up, 0.0, 1.0), ((0, 0), (pad, pad), (pad, pad)))
    pgm = (255 - np.rint(intensity * 255.0)).astype(np.uint8)
    pgm_train, pgm_test, y_train, y_test = train_test_split(
        pgm, digits.target, test_size=config.test_fraction, random_state=config.seed, stratify=digits.target
    )
    return Dataset(pgm_train, y_train.astype(np.int64), pgm_test, y_test.astype(np.int64))


# ---------------------------------------------------------------- numpy layers


def _im2col(x: np.ndarray) -> np.ndarray:
    """(N,C,H,W) -> (N*H*W, C*K*K) patches for a KxK 'same' convolution (cross-correlation, as ONNX Conv)."""
    n, c, h, w = x.shape
    p = KERNEL // 2
    patches = sliding_window_view(np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))), (KERNEL, KERNEL), axis=(2, 3))
    return patches.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, c * KERNEL * KERNEL)


def _col2im(cols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Adjoint of :func:`_im2col`: scatter-add patch gradients back to the input."""
    n, c, h, w = shape
    p = KERNEL // 2
    g = cols.reshape(n, h, w, c, KERNEL, KERNEL)
    out = np.zeros((n, c, h + 2 * p, w + 2 * p), dtype=cols.dtype)
    for i in range(KERNEL):
        for j in range(KERNEL):
            out[:, :, i : i + h, j : j + w] += g[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return out[:, :, p : p + h, p : p + w]


def _maxpool(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping kxk max pooling (floor mode); returns the output and the argmax mask."""
    n, c, h, w = x.shape
    ho, wo = h // k, w // k
    win = x[:, :, : ho * k, : wo * k].reshape(n, c, ho, k, wo, k).transpose(0, 1, 2, 4, 3, 5)
    flat = win.reshape(n, c, ho, wo, k * k)
    first = flat.argmax(axis=-1)  # one winner per window: the first maximum in raster order
    out = np.take_along_axis(flat, first[..., None], axis=-1)[..., 0]
    mask = (np.arange(k * k) == first[..., None]).reshape(n, c, ho, wo, k, k).transpose(0, 1, 2, 4, 3, 5)
    return out, mask


def _maxpool_back(grad: np.ndarray, mask: np.ndarray, shape: tuple[int, ...], k: int) -> np.ndarray:
    n, c, h, w = shape
    ho, wo = h // k, w // k
    out = np.zeros(shape, dtype=grad.dtype)
    out[:, :, : ho * k, : wo * k] = (mask * grad[:, :, :, None, :, None]).reshape(n, c, ho * k, wo * k)
    return out


def _init_params(rng: np.random.Generator) -> dict[str, np.ndarray]:
    def he(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return np.asarray(rng.standard_normal(shape) * np.sqrt(2.0 / fan_in), dtype=np.float32)

    c1, c2 = CHANNELS
    return {
        "w1": he((c1, 1, KERNEL, KERNEL), KERNEL * KERNEL),
        "b1": np.zeros(c1, np.float32),
        "w2": he((c2, c1, KERNEL, KERNEL), c1 * KERNEL * KERNEL),
        "b2": np.zeros(c2, np.float32),
        "w3": he((FEATURES, 10), FEATURES),
        "b3": np.zeros(10, np.float32),
    }


def _forward(params: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    n = x.shape[0]
    cols1 = _im2col(x)
    z1 = (cols1 @ params["w1"].reshape(CHANNELS[0], -1).T + params["b1"]).reshape(n, 28, 28, -1)
    a1 = np.maximum(z1.transpose(0, 3, 1, 2), 0)
    p1, m1 = _maxpool(a1, 2)
    cols2 = _im2col(p1)
    z2 = (cols2 @ params["w2"].reshape(CHANNELS[1], -1).T + params["b2"]).reshape(n, 14, 14, -1)
    a2 = np.maximum(z2.transpose(0, 3, 1, 2), 0)
    p2, m2 = _maxpool(a2, 3)
    feats = p2.reshape(n, FEATURES)
    logits = feats @ params["w3"] + params["b3"]
    cache = {"cols1": cols1, "a1": a1, "m1": m1, "p1": p1, "cols2": cols2, "a2": a2, "m2": m2, "feats": feats}
    return logits, cache


def _backward(
    params: dict[str, np.ndarray], cache: dict[str, np.ndarray], dlogits: np.ndarray
) -> dict[str, np.ndarray]:
    n = dlogits.shape[0]
    grads = {"w3": cache["feats"].T @ dlogits, "b3": dlogits.sum(axis=0)}
    dp2 = (dlogits @ params["w3"].T).reshape(n, CHANNELS[1], 4, 4)
    dz2 = _maxpool_back(dp2, cache["m2"], cache["a2"].shape, 3) * (cache["a2"] > 0)
    dz2_rows = dz2.transpose(0, 2, 3, 1).reshape(-1, CHANNELS[1])
    grads["w2"] = (dz2_rows.T @ cache["cols2"]).reshape(params["w2"].shape)
    grads["b2"] = dz2_rows.sum(axis=0)
    dp1 = _col2im(dz2_rows @ params["w2"].reshape(CHANNELS[1], -1), cache["p1"].shape)
    dz1 = _maxpool_back(dp1, cache["m1"], cache["a1"].shape, 2) * (cache["a1"] > 0)
    dz1_rows = dz1.transpose(0, 2, 3, 1).reshape(-1, CHANNELS[0])
    grads["w1"] = (dz1_rows.T @ cache["cols1"]).reshape(params["w1"].shape)
    grads["b1"] = dz1_rows.sum(axis=0)
    return grads


def _softmax_xent_grad(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted)
    probs /= probs.sum(axis=1, keepdims=True)
    probs[np.arange(len(labels)), labels] -= 1.0
    return np.asarray(probs / len(labels), dtype=np.float32)


def train_params(data: Dataset, config: TrainConfig) -> dict[str, np.ndarray]:
    """Minibatch Adam on softmax cross-entropy; deterministic for a given seed and single-threaded BLAS."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(config.seed)
    params = _init_params(rng)
    moments = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in params.items()}
    x_all, y_all = model_input(data.pgm_train), data.y_train
    beta1, beta2, eps, step = 0.9, 0.999, 1e-8, 0
    with threadpool_limits(limits=1):
        for _ in range(config.epochs):
            order = rng.permutation(len(y_all))
            for start in range(0, len(order), config.batch_size):
                idx = order[start : start + config.batch_size]
                logits, cache = _forward(params, x_all[idx])
                grads = _backward(params, cache, _softmax_xent_grad(logits, y_all[idx]))
                step += 1
                for key, grad in grads.items():
                    m, v = moments[key]
                    m *= beta1
                    m += (1 - beta1) * grad
                    v *= beta2
                    v += (1 - beta2) * grad * grad
                    m_hat = m / (1 - beta1**step)
                    v_hat = v / (1 - beta2**step)
                    params[key] -= (config.learning_rate * m_hat / (np.sqrt(v_hat) + eps)).astype(np.float32)
    return params


# ---------------------------------------------------------------- ONNX export


def export_onnx(params: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The trained weights as an opset-12 model with the ONNX-zoo MNIST node and tensor names."""
    c1, c2 = CHANNELS
    n = helper.make_node
    nodes = [
        n(
            "Conv",
            ["Input3", "Parameter5"],
            ["Convolution28_Output_0"],
            name="Convolution28",
            kernel_shape=[KERNEL, KERNEL],
            strides=[1, 1],
            auto_pad="SAME_UPPER",
            group=1,
            dilations=[1, 1],
        ),
        n("Add", ["Convolution28_Output_0", "Parameter6"], ["Plus30_Output_0"], name="Plus30"),
        n("Relu", ["Plus30_Output_0"], ["ReLU32_Output_0"], name="ReLU32"),
        n(
            "MaxPool",
            ["ReLU32_Output_0"],
            ["Pooling66_Output_0"],
            name="Pooling66",
            kernel_shape=[2, 2],
            strides=[2, 2],
            pads=[0, 0, 0, 0],
        ),
        n(
            "Conv",
            ["Pooling66_Output_0", "Parameter87"],
            ["Convolution110_Output_0"],
            name="Convolution110",
            kernel_shape=[KERNEL, KERNEL],
            strides=[1, 1],
            auto_pad="SAME_UPPER",
            group=1,
            dilations=[1, 1],
        ),
        n("Add", ["Convolution110_Output_0", "Parameter88"], ["Plus112_Output_0"], name="Plus112"),
        n("Relu", ["Plus112_Output_0"], ["ReLU114_Output_0"], name="ReLU114"),
        n(
            "MaxPool",
            ["ReLU114_Output_0"],
            ["Pooling160_Output_0"],
            name="Pooling160",
            kernel_shape=[3, 3],
            strides=[3, 3],
            pads=[0, 0, 0, 0],
        ),
        n(
            "Reshape",
            ["Pooling160_Output_0", "Pooling160_Output_0_reshape0_shape"],
            ["Pooling160_Output_0_reshape0"],
            name="Times212_reshape0",
        ),
        n("MatMul", ["Pooling160_Output_0_reshape0", "Parameter193"], ["Times212_Output_0"], name="Times212"),
        n("Add", ["Times212_Output_0", "Parameter194"], ["Plus214_Output_0"], name="Plus214"),
    ]
    inits = [
        numpy_helper.from_array(params["w1"].astype(np.float32), "Parameter5"),
        numpy_helper.from_array(params["b1"].astype(np.float32).reshape(c1, 1, 1), "Parameter6"),
        numpy_helper.from_array(params["w2"].astype(np.float32), "Parameter87"),
        numpy_helper.from_array(params["b2"].astype(np.float32).reshape(c2, 1, 1), "Parameter88"),
        numpy_helper.from_array(np.array([1, FEATURES], dtype=np.int64), "Pooling160_Output_0_reshape0_shape"),
        numpy_helper.from_array(params["w3"].astype(np.float32), "Parameter193"),
        numpy_helper.from_array(params["b3"].astype(np.float32).reshape(1, 10), "Parameter194"),
    ]
    graph = helper.make_graph(
        nodes,
        "CNTKGraph",
        [helper.make_tensor_value_info("Input3", TensorProto.FLOAT, [1, 1, IMAGE_SIZE, IMAGE_SIZE])],
        [helper.make_tensor_value_info("Plus214_Output_0", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    doc = (
        "CNN trained in numpy on scikit-learn digits upsampled to 28x28 (castguard test_models/mnist_train.py); "
        "ONNX-zoo MNIST structure and names"
    )
    return make_model(graph, opset=12, doc=doc)


def run_onnx(model: onnx.ModelProto, images: np.ndarray, *, outputs: list[str] | None = None) -> dict[str, np.ndarray]:
    """Run ``images`` (N,1,28,28) one at a time through onnxruntime CPU; returns each requested tensor stacked."""
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    names = outputs or [o.name for o in model.graph.output]
    known = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names if name not in known)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    per_image = [sess.run(names, {"Input3": img[None]}) for img in images]
    return {name: np.concatenate([r[i] for r in per_image]) for i, name in enumerate(names)}


def pick_samples(logits: np.ndarray, labels: np.ndarray) -> tuple[int, ...]:
    """For each digit 0..9, the correctly classified test image with the largest logit margin."""
    top2 = np.sort(logits, axis=1)[:, -2:]
    margin = np.where(logits.argmax(axis=1) == labels, top2[:, 1] - top2[:, 0], -np.inf)
    picks = []
    for digit in range(10):
        candidates = np.flatnonzero(labels == digit)
        best = candidates[np.argmax(margin[candidates])]
        if not np.isfinite(margin[best]):
            raise RuntimeError(f"no correctly classified test image of digit {digit}")
        picks.append(int(best))
    return tuple(picks)


def _block_absmax(params: dict[str, np.ndarray], x: np.ndarray, *, batch: int = 256) -> tuple[float, float]:
    """Largest |conv output| of each conv block, with and without its bias (what Conv and Add produce)."""
    peaks = [0.0, 0.0]
    for start in range(0, len(x), batch):
        _, cache = _forward(params, x[start : start + batch])
        for i, (cols, w, b) in enumerate(
            ((cache["cols1"], params["w1"], params["b1"]), (cache["cols2"], params["w2"], params["b2"]))
        ):
            conv = cols @ w.reshape(len(b), -1).T
            peaks[i] = max(peaks[i], float(np.abs(conv).max()), float(np.abs(conv + b).max()))
    return peaks[0], peaks[1]


def rescale_activations(
    params: dict[str, np.ndarray], x: np.ndarray, targets: tuple[float, float] = ACTIVATION_TARGETS
) -> dict[str, np.ndarray]:
    """Move each conv block's activation range near its target without changing the function.

    ReLU and max pooling commute with positive scaling, so conv1 (weights and bias) times a, conv2's
    weights times b/a, its bias times b and the classifier's weights divided by b leave the logits as
    they were. a and b are powers of two, which makes the rescaling exact in floating point.
    """
    peak1, peak2 = _block_absmax(params, x)
    a = 2.0 ** round(np.log2(targets[0] / peak1))
    b = 2.0 ** round(np.log2(targets[1] / peak2))
    scale = {"w1": a, "b1": a, "w2": b / a, "b2": b, "w3": 1.0 / b, "b3": 1.0}
    return {k: (v * np.float32(scale[k])).astype(np.float32) for k, v in params.items()}


def train_and_export(config: TrainConfig = TrainConfig()) -> tuple[TrainedModel, Dataset]:
    data = load_dataset(config)
    params = rescale_activations(train_params(data, config), model_input(data.pgm_train))
    model = export_onnx(params)
    tensors = [out for node in model.graph.node for out in node.output]
    results = run_onnx(model, model_input(data.pgm_test), outputs=tensors)
    logits = results["Plus214_Output_0"]
    accuracy = float(np.mean(logits.argmax(axis=1) == data.y_test))
    absmax = {name: float(np.abs(v).max()) for name, v in results.items()}
    trained = TrainedModel(
        model=model, test_accuracy=accuracy, sample_indices=pick_samples(logits, data.y_test), activation_absmax=absmax
    )
    return trained, data
