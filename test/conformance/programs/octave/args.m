args = argv();
for i = 1:numel(args)
  printf("%s\n", args{i});
end
