let x: int = "not an int"
echo x
