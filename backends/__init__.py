"""Framework backends. Each subpackage has the same modules: ``environment`` (framework-free set-up: logical
devices, quiet logs), ``backend`` (the :class:`toolkit.Backend`), ``ops`` (the neutral ops) and
``variables`` (device-placed variables). Importing a subpackage imports no framework; importing its ``backend``
module does."""
