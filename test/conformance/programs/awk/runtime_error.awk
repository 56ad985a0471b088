BEGIN { getline line < "/nonexistent/dir"; printf "x" > "/nonexistent/dir/file" }
