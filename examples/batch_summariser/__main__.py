"""``python -m examples.batch_summariser [FOLDER]`` in a checkout,
``python -m pipeline.examples.batch_summariser [FOLDER]`` from the wheel."""

from .summariser import run


run()
