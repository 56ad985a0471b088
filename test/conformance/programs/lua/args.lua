for i = 1, #arg do print(arg[i]) end
