"""jaxwrite.kernels"""
