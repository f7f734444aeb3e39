"""neuract.runtime (placeholder)"""
