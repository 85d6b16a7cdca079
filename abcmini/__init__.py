"""abcmini: Attention Bias Scaffolding and Calibration, small and readable."""
