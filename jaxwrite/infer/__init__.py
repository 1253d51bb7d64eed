"""jaxwrite.infer"""
