"""End-to-end pipelines, one per paper: :mod:`.lpgnn`, :mod:`.rgnn`, :mod:`.dprr`,
:mod:`.heterpoisson`.  Each has ``fit(...)`` returning a report (accuracy, the privacy
spent, the settings) and ``reproduce_main(argv)`` behind ``ldpfast reproduce METHOD``."""
from ._common import random_split  # noqa: F401
