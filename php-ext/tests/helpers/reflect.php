<?php
// Describes the WriterLock classes through reflection, as JSON: from the
// loaded extension (argv[1] = "ext") or from the IDE stubs (argv[1] = a stub
// file, in a process without the extension).
$names = array( 'WriterLock\\Exception', 'WriterLock\\BusyException', 'WriterLock\\StartException', 'WriterLock\\Queue' );
if ( $argv[1] !== 'ext' )
{
    if ( extension_loaded( 'writerlock' ) )
    {
        fwrite( STDERR, "the stubs must be read without the extension loaded\n" );
        exit( 2 );
    }
    require $argv[1];
}

function type_text( $type )
{
    return $type === null ? null : (string)$type;
}

$out = array();
foreach ( $names as $name )
{
    if ( !class_exists( $name ) )
    {
        $out[$name] = 'missing';
        continue;
    }
    $class = new ReflectionClass( $name );
    $methods = array();
    foreach ( $class->getMethods() as $method )
    {
        if ( $method->getDeclaringClass()->getName() !== $name )
        {
            continue;   // inherited from PHP's own classes
        }
        $params = array();
        foreach ( $method->getParameters() as $param )
        {
            $default = null;
            if ( $param->isDefaultValueAvailable() )
            {
                $default = var_export( $param->getDefaultValue(), true );
            }
            $params[] = array( 'name' => $param->getName(), 'type' => type_text( $param->getType() ),
                               'nullable' => $param->allowsNull(), 'optional' => $param->isOptional(),
                               'default' => $default, 'byRef' => $param->isPassedByReference(),
                               'variadic' => $param->isVariadic() );
        }
        $methods[$method->getName()] = array(
            'static' => $method->isStatic(), 'public' => $method->isPublic(), 'final' => $method->isFinal(),
            'abstract' => $method->isAbstract(), 'return' => type_text( $method->getReturnType() ),
            'required' => $method->getNumberOfRequiredParameters(), 'params' => $params );
    }
    ksort( $methods );
    $properties = array();
    foreach ( $class->getProperties( ReflectionProperty::IS_PUBLIC | ReflectionProperty::IS_PROTECTED ) as $property )
    {
        if ( $property->getDeclaringClass()->getName() === $name )
        {
            $properties[] = $property->getName();
        }
    }
    $parent = $class->getParentClass();
    $out[$name] = array( 'parent' => $parent ? $parent->getName() : null, 'final' => $class->isFinal(),
                         'abstract' => $class->isAbstract(), 'interfaces' => $class->getInterfaceNames(),
                         'constants' => $class->getConstants(), 'properties' => $properties, 'methods' => $methods );
    sort( $out[$name]['interfaces'] );
}
echo json_encode( $out, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES ), "\n";
