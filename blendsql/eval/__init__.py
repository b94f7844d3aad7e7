"""blendsql.eval"""
