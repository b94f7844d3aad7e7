"""blendsql.execute"""
