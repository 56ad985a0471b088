procedure Main is
begin
   raise Program_Error with "boom";
end Main;
