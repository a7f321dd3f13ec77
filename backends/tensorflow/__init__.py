"""The TensorFlow backend: ``tf.device`` placement, ``tf.Variable`` replicas, ``tf.function`` per device."""
