"""blendsql.nl"""
