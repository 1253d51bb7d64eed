"""jaxwrite.text"""
