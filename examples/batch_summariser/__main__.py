"""``python -m examples.batch_summariser [FOLDER]``."""

from examples.batch_summariser.summariser import run


run()
