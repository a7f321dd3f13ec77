"""The constructor-argument walk's tables (tests/test_keras_import_settings.py) for the layers of
``toolkit/keras/layers_{conv,shape,activation,noise,normalization}.py``: how to make each from its required
arguments, a value other than Keras' default for every constructor argument, and which of them from_keras refuses
(every other one it honours, with Keras' numbers)."""

from __future__ import annotations

#: Inputs of the walk's models besides its own (shape without the batch, dtype).
INPUTS = {"volume": ((4, 4, 4, 2), "float64")}
#: Layers Keras on TensorFlow cannot run in float64 (TensorFlow has no float64 MaxPool3D, not even under XLA): the
#: walk checks their refusals only; tests/test_keras_layers_more.py checks their numbers against Keras in float32.
KERAS_CANNOT_RUN = frozenset({"MaxPooling3D"})
#: Layers whose Keras training step needs XLA on TensorFlow's CPU (no float64 AvgPool3D kernel otherwise).
KERAS_TRAINS_WITH_XLA = frozenset({"AveragePooling3D"})
#: Arguments every layer has that a layer's class refuses from the caller (ActivityRegularization's regularizer is
#: its l1 and l2; the spatial dropouts take a name and a dtype only).
NOT_ARGUMENTS = {"ActivityRegularization": {"activity_regularizer"},
                 **{f"SpatialDropout{d}": {"trainable", "activity_regularizer"} for d in ("1D", "2D", "3D")}}

_ND = ("1D", "2D", "3D")
_INPUT = {"1D": "sequence", "2D": "image", "3D": "volume"}


def layers(keras) -> dict:
    """Each layer: (its input, how to make it from its required arguments and ``options``)."""
    L = keras.layers

    def make(kind, **required):
        return lambda **o: getattr(L, kind)(**{**required, **o})

    return {
        **{f"Conv{d}": (_INPUT[d], make(f"Conv{d}", filters=6, kernel_size=2)) for d in _ND if d != "2D"},
        **{f"SeparableConv{d}": (_INPUT[d], make(f"SeparableConv{d}", filters=4, kernel_size=2)) for d in _ND[:2]},
        **{f"DepthwiseConv{d}": (_INPUT[d], make(f"DepthwiseConv{d}", kernel_size=2)) for d in _ND[:2]},
        **{f"Conv{d}Transpose": (_INPUT[d], make(f"Conv{d}Transpose", filters=4, kernel_size=2)) for d in _ND},
        **{f"{kind}Pooling{d}": (_INPUT[d], make(f"{kind}Pooling{d}", pool_size=2))
           for kind in ("Max", "Average") for d in _ND if f"{kind}Pooling{d}" not in ("MaxPooling2D",
                                                                                      "AveragePooling2D")},
        **{f"Global{kind}Pooling{d}": (_INPUT[d], make(f"Global{kind}Pooling{d}"))
           for kind in ("Max", "Average") for d in _ND if f"Global{kind}Pooling{d}" not in (
               "GlobalMaxPooling2D", "GlobalAveragePooling2D", "GlobalAveragePooling1D")},
        **{f"ZeroPadding{d}": (_INPUT[d], make(f"ZeroPadding{d}")) for d in _ND},
        "Cropping1D": ("sequence", make("Cropping1D")), "Cropping2D": ("image", make("Cropping2D")),
        "Cropping3D": ("volume", make("Cropping3D", cropping=((1, 0), (1, 0), (0, 0)))),
        **{f"UpSampling{d}": (_INPUT[d], make(f"UpSampling{d}")) for d in _ND},
        "Reshape": ("flat", make("Reshape", target_shape=(5, 1))),
        "Permute": ("sequence", make("Permute", dims=(1, 2))),
        "RepeatVector": ("flat", make("RepeatVector", n=2)), "Rescaling": ("flat", make("Rescaling", scale=0.5)),
        "Identity": ("flat", make("Identity")), "Dot": ("flat", make("Dot", axes=-1)),
        # Slope 0.25: Keras on TensorFlow rounds it to float32 (its default 0.3 is then 1e-8 off).
        "LeakyReLU": ("flat", make("LeakyReLU", negative_slope=0.25)),
        "ELU": ("flat", make("ELU")), "PReLU": ("flat", make("PReLU")),
        "Softmax": ("sequence", make("Softmax")),
        # Rates 0: Keras' noise is not the toolkit's (by design), so the walk's training step has none.
        **{f"SpatialDropout{d}": (_INPUT[d], make(f"SpatialDropout{d}", rate=0.0)) for d in _ND},
        "GaussianNoise": ("flat", make("GaussianNoise", stddev=0.0)),
        "GaussianDropout": ("flat", make("GaussianDropout", rate=0.0)),
        "ActivityRegularization": ("flat", make("ActivityRegularization")),
        "UnitNormalization": ("sequence", make("UnitNormalization")),
        "GroupNormalization": ("sequence", make("GroupNormalization", groups=1)),
        "Normalization": ("sequence", make("Normalization", mean=0.0, variance=1.0)),
        "SimpleRNN": ("sequence", make("SimpleRNN", units=4)),
        "Bidirectional": ("sequence", lambda **o: L.Bidirectional(**{"layer": L.LSTM(4), **o})),
        "TimeDistributed": ("sequence", lambda **o: L.TimeDistributed(**{"layer": L.Dense(4), **o})),
        "Attention": ("sequence", make("Attention")),
    }


def _bidirectional_weights(keras) -> list:
    """Initial weights for the walk's ``Bidirectional(LSTM(4))`` other than Keras' own."""
    layer = keras.layers.Bidirectional(keras.layers.LSTM(4))
    layer.build((None, 5, 3))
    return [w + 0.125 for w in layer.get_weights()]


def values(keras, shared: dict) -> dict[str, dict]:
    """A value other than the default for every constructor argument of every layer (``shared``: the walk's values
    of the arguments every layer has)."""
    reg, con, init = keras.regularizers, keras.constraints, keras.initializers
    weighted = {"activation": "tanh", "use_bias": False, "bias_initializer": init.Constant(0.5),
                "bias_regularizer": reg.L1(2.0 ** -3), "bias_constraint": con.NonNeg()}
    kernel = {"kernel_initializer": "he_normal", "kernel_regularizer": reg.L2(2.0 ** -4),
              "kernel_constraint": con.MaxNorm(0.5)}
    depthwise = {"depthwise_initializer": "he_normal", "depthwise_regularizer": reg.L2(2.0 ** -4),
                 "depthwise_constraint": con.MaxNorm(0.5)}
    pointwise = {"pointwise_initializer": "he_normal", "pointwise_regularizer": reg.L2(2.0 ** -5),
                 "pointwise_constraint": con.MaxNorm(0.5)}
    conv = {"kernel_size": 3, "strides": 2, "padding": "same", "data_format": "channels_first", "dilation_rate": 2,
            **weighted}
    pooling = {"pool_size": 3, "strides": 1, "padding": "same", "data_format": "channels_first"}
    global_ = {"data_format": "channels_first", "keepdims": True}
    options = {
        "Conv1D": {**conv, **kernel, "filters": 3, "padding": "causal", "groups": 3},
        "Conv3D": {**conv, **kernel, "filters": 4, "kernel_size": 2, "groups": 2},
        **{f"SeparableConv{d}": {**conv, **depthwise, **pointwise, "filters": 2, "kernel_size": 2,
                                 "depth_multiplier": 2} for d in _ND[:2]},
        **{f"DepthwiseConv{d}": {**conv, **depthwise, "kernel_size": 2, "depth_multiplier": 2} for d in _ND[:2]},
        **{f"Conv{d}Transpose": {**conv, **kernel, "filters": 2, "output_padding": 0} for d in _ND},
        "MaxPooling1D": pooling, "AveragePooling1D": pooling, "MaxPooling3D": {**pooling, "pool_size": 2},
        "AveragePooling3D": {**pooling, "pool_size": 2},
        **{kind: global_ for kind in ("GlobalMaxPooling1D", "GlobalMaxPooling3D", "GlobalAveragePooling3D")},
        "ZeroPadding1D": {"padding": 2, "data_format": "channels_first"},
        "ZeroPadding2D": {"padding": ((1, 2), (0, 1)), "data_format": "channels_first"},
        "ZeroPadding3D": {"padding": 2, "data_format": "channels_first"},
        "Cropping1D": {"cropping": (1, 2)},
        "Cropping2D": {"cropping": ((1, 0), (0, 2)), "data_format": "channels_first"},
        "Cropping3D": {"cropping": ((0, 1), (1, 0), (1, 1)), "data_format": "channels_first"},
        "UpSampling1D": {"size": 3},
        "UpSampling2D": {"size": (2, 3), "data_format": "channels_first", "interpolation": "bilinear"},
        "UpSampling3D": {"size": (1, 2, 1), "data_format": "channels_first"},
        "Reshape": {"target_shape": (1, 5)}, "Permute": {"dims": (2, 1)}, "RepeatVector": {"n": 3},
        "Rescaling": {"scale": 2.0, "offset": 0.25}, "Identity": {}, "Dot": {"axes": 1, "normalize": True},
        "LeakyReLU": {"negative_slope": 0.125}, "ELU": {"alpha": 0.5},
        "PReLU": {"alpha_initializer": init.Constant(0.25), "alpha_regularizer": reg.L2(2.0 ** -4),
                  "alpha_constraint": con.NonNeg(), "shared_axes": [1]},
        "Softmax": {"axis": 1},
        "SpatialDropout1D": {"rate": 0.25, "seed": 3},
        **{f"SpatialDropout{d}": {"rate": 0.25, "seed": 3, "data_format": "channels_first"} for d in _ND[1:]},
        "GaussianNoise": {"stddev": 0.5, "seed": 3}, "GaussianDropout": {"rate": 0.25, "seed": 3},
        "ActivityRegularization": {"l1": 2.0 ** -3, "l2": 2.0 ** -4},
        "UnitNormalization": {"axis": 1},
        "GroupNormalization": {"groups": 3, "axis": 1, "epsilon": 2.0 ** -5, "center": False, "scale": False,
                               "beta_initializer": init.Constant(0.25), "gamma_initializer": init.Constant(1.5),
                               "beta_regularizer": reg.L2(2.0 ** -3), "gamma_regularizer": reg.L1(2.0 ** -4),
                               "beta_constraint": con.NonNeg(), "gamma_constraint": con.UnitNorm()},
        "Normalization": {"axis": 1, "mean": 0.5, "variance": 4.0, "invert": True},
        "SimpleRNN": {"units": 2, "activation": "relu", "use_bias": False, "kernel_initializer": "he_normal",
                      "recurrent_initializer": "glorot_normal", "bias_initializer": init.Constant(0.5),
                      "kernel_regularizer": reg.L2(2.0 ** -4), "recurrent_regularizer": reg.L1(2.0 ** -5),
                      "bias_regularizer": reg.L2(2.0 ** -3), "kernel_constraint": con.MaxNorm(1.0),
                      "recurrent_constraint": con.NonNeg(), "bias_constraint": con.UnitNorm(), "dropout": 0.25,
                      "recurrent_dropout": 0.25, "seed": 3, "return_sequences": True, "return_state": True,
                      "go_backwards": True, "stateful": True, "unroll": True, "zero_output_for_mask": True},
        "Bidirectional": {"layer": keras.layers.GRU(2), "merge_mode": "sum", "weights": _bidirectional_weights(keras),
                          "backward_layer": keras.layers.LSTM(4, go_backwards=True, unroll=True)},
        "TimeDistributed": {"layer": keras.layers.Dense(2, activation="tanh")},
        "Attention": {"use_scale": True, "score_mode": "concat", "dropout": 0.25, "seed": 3},
    }
    return {kind: {**{k: v for k, v in shared.items() if k not in NOT_ARGUMENTS.get(kind, ())}, **given}
            for kind, given in options.items()}


_SHARED_REFUSED = {"dtype"}
#: The walk's outcomes that are refusals, by layer: mixed precision and the arguments named; every other argument
#: is honoured.
REFUSED = {
    "UpSampling2D": _SHARED_REFUSED | {"interpolation"},
    "SimpleRNN": _SHARED_REFUSED | {"return_state", "stateful"},
    # Keras cannot serialize an activity_regularizer given to these (get_config fails), so from_keras cannot read
    # their arguments
    **{kind: _SHARED_REFUSED | {"activity_regularizer"} for kind in ("Identity", "ELU")},
}


#: Every layer these tables walk.
KINDS = (*(f"Conv{d}" for d in ("1D", "3D")), *(f"SeparableConv{d}" for d in _ND[:2]),
         *(f"DepthwiseConv{d}" for d in _ND[:2]), *(f"Conv{d}Transpose" for d in _ND),
         "MaxPooling1D", "MaxPooling3D", "AveragePooling1D", "AveragePooling3D", "GlobalMaxPooling1D",
         "GlobalMaxPooling3D", "GlobalAveragePooling3D", *(f"{kind}{d}" for kind in ("ZeroPadding", "Cropping",
                                                                                    "UpSampling") for d in _ND),
         "Reshape", "Permute", "RepeatVector", "Rescaling", "Identity", "Dot", "LeakyReLU", "ELU", "PReLU", "Softmax",
         *(f"SpatialDropout{d}" for d in _ND), "GaussianNoise", "GaussianDropout", "ActivityRegularization",
         "UnitNormalization", "GroupNormalization", "Normalization", "SimpleRNN", "Bidirectional", "TimeDistributed",
         "Attention")
#: Refusals of every layer of :data:`KINDS` (those not in :data:`REFUSED` refuse the dtype policy only).
ALL_REFUSED = {kind: REFUSED.get(kind, _SHARED_REFUSED) for kind in KINDS}
#: Their training arguments (regularizers, ``trainable``) are applied by the importer's code that the walk's first
#: layers run on every backend; on the Theano family these would add about 80 compiled steps for no other code path,
#: so they are walked on TensorFlow (every argument), as the op and layer tests show the ops equal across backends.
TENSORFLOW_ONLY = frozenset(KINDS)
