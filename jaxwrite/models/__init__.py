"""jaxwrite.models"""
