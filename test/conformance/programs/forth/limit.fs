: forever  begin again ;
forever
