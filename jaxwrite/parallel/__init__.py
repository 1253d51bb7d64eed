"""jaxwrite.parallel"""
