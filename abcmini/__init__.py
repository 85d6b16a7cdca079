"""abcmini: Attention Bias Scaffolding and Calibration, small and readable."""

__version__ = "0.1.0"
